"""Same-host reads of the SSD tier (docs/tiers.md, "Local SSD tier"; the
shm transport's file requests, src/rdma/README.md): a client on the store
server's host asks over the shm socket for the file of a local_disk
replica, the server checks it as a tcp READ of `<segment>#ssd` (the
capability where --data-require-capability is on), opens the file
read-only and passes its descriptor; the client reads and checks it
itself.  A refusal (a capability missing or forged) is counted, hands out
no descriptor, and the read goes by tcp."""
import os
import socket
import struct
import sys

import pytest

from conftest import BIN_DIR, free_port, http_get, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
os.environ.setdefault("CRESCENT_LIB", os.path.join(BIN_DIR, "..", "lib", "libcrescent.so"))
from crescent import Store  # noqa: E402

MiB = 1 << 20
EVICTION = ("--eviction-high-watermark-ratio", "0.5", "--eviction-ratio", "0.2")
ILLEGAL_CLIENT = -601
SHM_MAGIC = 0x33534D58  # "XMS3" (src/rdma/xfer_shm.h)
SHM_FILE = 1
# struct cr_xfer_shm_request / cr_xfer_shm_reply, native layout (same host, same build).
REQUEST = struct.Struct("@IBBB255s48sQQ")
REPLY = struct.Struct("@IiIQQQ")


def metric(d, name):
    status, body = http_get(d.port, "/metrics")
    assert status == 200
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    return None


def local_segment(daemon, tmp_path, *extra):
    rpc_port = free_port()
    d = daemon("--rpc-address", f"tcp://127.0.0.1:{rpc_port}", "--local-segment-size", "32M",
               "--local-segment-ssd-dir", str(tmp_path / "ssd"),
               "--local-segment-ssd-size", "256M", "--promotion-hits", "0", *EVICTION, *extra)
    s = Store()
    assert s.setup(master_server_address=f"127.0.0.1:{rpc_port}", timeout_ms=10000) == 0
    return d, s


def offload_some(d, s, n=24):
    """Puts n MiB objects past the watermark and returns {key: bytes} of those
    that live on the SSD only (replica lists asked for once offloads are
    committed: each grants a lease, which eviction skips)."""
    payloads = {f"key/{i}": os.urandom(MiB) for i in range(n)}
    for k, v in payloads.items():
        assert s.put(k, v) == 0
    wait_for(lambda: (metric(d, "crescent_segments_offloads_done_total") or 0) >= 4,
             "offloads committed")
    gone = {k: v for k, v in payloads.items()
            if [r["tier"] for r in s.get_replica_list(k)] == ["local_disk"]}
    assert len(gone) >= 2
    return gone


def shm_file_request(endpoint, segment, addr, length, cap):
    """One raw file request on the server's shm socket: (status, fds passed)."""
    name = segment.encode()
    req = REQUEST.pack(SHM_MAGIC, len(name), 1 if cap else 0, SHM_FILE, name,
                       cap or b"", addr, length)
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
        sock.settimeout(10)
        sock.connect(b"\0crescent-xfer/" + endpoint.encode())
        sock.send(req)
        msg, fds, _flags, _addr = socket.recv_fds(sock, REPLY.size, 2)
    for fd in fds:
        os.close(fd)
    magic, status = REPLY.unpack(msg)[:2]
    assert magic == SHM_MAGIC
    return status, len(fds)


def test_same_host_gets_read_the_ssd_file_passed_over_shm(daemon, tmp_path):
    d, s = local_segment(daemon, tmp_path)
    try:
        gone = offload_some(d, s)
        files0 = metric(d, "crescent_data_transfer_shm_files_total")
        reads0 = metric(d, "crescent_data_transfer_reads_total")
        for k, v in gone.items():
            assert s.get(k) == v
        assert metric(d, "crescent_data_transfer_shm_files_total") - files0 == len(gone)
        assert metric(d, "crescent_data_transfer_shm_files_refused_total") == 0
        # No tcp READ of the SSD segment: every byte came from the file.
        assert metric(d, "crescent_data_transfer_reads_total") == reads0
        assert s.offload_shm_counts() == {"reads": len(gone), "fallbacks": 0}
    finally:
        s.close()


def test_a_file_without_a_valid_capability_is_refused(daemon, tmp_path):
    """--data-require-capability: the master's capability opens the file;
    none, a forged one or one for another object are refused, no descriptor
    passed, each counted; libcrescent's gets still read over shm."""
    d, s = local_segment(daemon, tmp_path, "--data-require-capability", "true")
    try:
        gone = offload_some(d, s)
        for k, v in gone.items():
            assert s.get(k) == v
        assert s.offload_shm_counts() == {"reads": len(gone), "fallbacks": 0}
        key = next(iter(gone))
        r = next(r for r in s.get_replica_list(key) if r["tier"] == "local_disk")
        cap, ep, pos, size = r["capability"], r["endpoint"], r["position"], r["size"]
        seg = r["segment_name"] + "#ssd"
        refused0 = metric(d, "crescent_data_transfer_shm_files_refused_total")
        forged = cap[:-1] + bytes([cap[-1] ^ 1])
        assert shm_file_request(ep, seg, pos, size, None) == (ILLEGAL_CLIENT, 0)
        assert shm_file_request(ep, seg, pos, size, forged) == (ILLEGAL_CLIENT, 0)
        assert shm_file_request(ep, seg, pos + 1, size, cap) == (ILLEGAL_CLIENT, 0)
        assert metric(d, "crescent_data_transfer_shm_files_refused_total") - refused0 == 3
        assert shm_file_request(ep, seg, pos, size, cap) == (0, 1)
    finally:
        s.close()


@pytest.mark.parametrize("flag", ["--data-no-shm"])
def test_without_shm_the_ssd_is_read_by_tcp(daemon, tmp_path, flag):
    d, s = local_segment(daemon, tmp_path, flag, "true")
    try:
        gone = offload_some(d, s)
        for k, v in gone.items():
            assert s.get(k) == v
        assert metric(d, "crescent_data_transfer_shm_files_total") == 0
        assert s.offload_shm_counts() == {"reads": 0, "fallbacks": 0}
    finally:
        s.close()
