"""crescent-store's SSD tier (docs/tiers.md, "Local SSD tier"): its flags, the check of
every file at start (a corrupt file and an interrupted write are removed and
counted, a file that is not the tier's is left alone), and the read-only
"<segment>#ssd" reader segment on its transfer server: a READ of an id the
tier does not hold is an error answer, a WRITE is refused.

Offload on eviction and reads of local_disk replicas: test_ssd_offload.py; the
round trip of valid files is covered by tests/unit/test_ssd_store.c."""
import json
import signal
import socket
import struct
import subprocess
import time

from conftest import binary, free_port, http_get, wait_for

CR_ERR_OBJECT_NOT_FOUND = -704
CR_ERR_INVALID_PARAMS = -600


def store_flags_run(*args):
    return subprocess.run([binary("crescent-store"), *args], capture_output=True, text=True,
                          timeout=60)


def test_ssd_flags():
    p = store_flags_run("--help")
    assert p.returncode == 0
    for flag in ("--ssd-dir PATH", "--ssd-size SIZE", "--promotion-hits N"):
        assert flag in p.stdout
    alone = store_flags_run("--ssd-dir", "/tmp/x")
    assert alone.returncode == 2 and "--ssd-dir and --ssd-size go together" in alone.stderr
    alone = store_flags_run("--ssd-size", "1G")
    assert alone.returncode == 2 and "go together" in alone.stderr
    bad = store_flags_run("--ssd-dir", "/tmp/x", "--ssd-size", "0")
    assert bad.returncode == 2 and "--ssd-size '0'" in bad.stderr
    hits = store_flags_run("--promotion-hits", "-1")
    assert hits.returncode == 2 and "--promotion-hits" in hits.stderr


def test_unwritable_ssd_dir_stops_the_server(tmp_path):
    file = tmp_path / "a-file"
    file.write_text("not a directory")
    p = store_flags_run("--master", f"tcp://127.0.0.1:{free_port()}", "--ssd-dir", str(file),
                        "--ssd-size", "1M", "--no-pin")
    assert p.returncode == 2
    assert str(file) in p.stderr and "(--ssd-dir, --ssd-size)" in p.stderr


def read_frame(name, addr, length, op=1, request_id=7):
    raw = name.encode()
    return struct.pack("<BBHIQQ", op, len(raw), 0, request_id, addr, length) + raw


def answer(sock):
    data = b""
    while len(data) < 16:
        chunk = sock.recv(16 - len(data))
        if not chunk:
            return None
        data += chunk
    return struct.unpack("<IiQ", data)


def test_start_drops_bad_files_and_serves_the_reader_segment(daemon, tmp_path):
    rpc = f"tcp://127.0.0.1:{free_port()}"
    d = daemon("--rpc-address", rpc, "--local-segment-size", "0")
    ssd = tmp_path / "ssd"
    ssd.mkdir()
    (ssd / "0000000000000005.crs").write_bytes(b"CRSSDv\r\n" + b"\x01" * 100)  # corrupt
    (ssd / "0000000000000009.tmp").write_bytes(b"half a write")               # interrupted
    (ssd / "README").write_text("not the tier's: left alone")
    port = free_port()
    log_path = tmp_path / "store.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [binary("crescent-store"), "--master", rpc, "--segment-name", "seg0",
             "--segment-size", str(64 << 20), "--no-pin", "--no-shm", "--ping-interval-ms", "200",
             "--data-address", f"127.0.0.1:{port}", "--ssd-dir", str(ssd), "--ssd-size", "1G"],
            stdout=log, stderr=subprocess.STDOUT)
    try:
        def mounted():
            status, body = http_get(d.port, "/api/v1/stats")
            return status == 200 and json.loads(body)["segments"] == 1
        wait_for(mounted, "the store server mounted")
        text = log_path.read_text()
        assert "0 object(s), 0 bytes kept; 1 bad file(s) dropped, 1 interrupted write(s) removed" \
            in text, text
        assert "0000000000000005.crs: dropped:" in text
        assert sorted(p.name for p in ssd.iterdir()) == ["README"]

        with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
            s.sendall(read_frame("seg0#ssd", 5, 16))  # the dropped file's id
            request_id, status, length = answer(s)
            assert (request_id, status, length) == (7, CR_ERR_OBJECT_NOT_FOUND, 0)
            s.sendall(read_frame("seg0#ssd", 5, 5, op=2) + b"hello")  # read-only
            request_id, status, length = answer(s)
            assert (status, length) == (CR_ERR_INVALID_PARAMS, 0)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    text = log_path.read_text()
    assert "SSD tier " + str(ssd) + ": 0 object(s)" in text and "1 corrupt dropped" in text
