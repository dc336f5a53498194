"""python -m crescent.store_service: the reference's standalone store client
over HTTP (Mooncake's mooncake_store_service.py routes and config keys),
against a real crescentd; the service hosts its own segment."""
import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request

from conftest import free_port, wait_for
from test_mooncake_store import PYTHON, segments

MiB = 1 << 20


def request(port, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_store_service_routes(daemon, tmp_path):
    rpc = free_port()
    d = daemon("--rpc-address", f"tcp://127.0.0.1:{rpc}", "--default-kv-lease-ttl", "300")
    config = tmp_path / "mooncake.json"
    config.write_text(json.dumps({"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                                  "global_segment_size": 16 * MiB, "local_buffer_size": 0,
                                  "protocol": "tcp", "device_name": "",
                                  "master_server_address": f"127.0.0.1:{rpc}"}))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "crescent.store_service", "--config",
                             str(config), "--port", str(port)],
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": PYTHON},
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: _up(port), "the store service to answer", timeout=30)
        assert len(segments(d)) == 1                         # it hosts its segment
        assert request(port, "PUT", "/api/put", {"key": "a", "value": "hello"}) == \
            (200, b'{"status": "success"}')
        assert request(port, "GET", "/api/get/a") == (200, b"hello")
        assert request(port, "GET", "/api/exist/a") == (200, b'{"exists": true}')
        assert request(port, "GET", "/api/get/nope")[0] == 404
        assert request(port, "GET", "/api/exist/nope") == (200, b'{"exists": false}')
        assert request(port, "PUT", "/api/put", {"key": "a"})[0] == 400
        wait_for(lambda: request(port, "DELETE", "/api/remove/a")[0] == 200,
                 "the read lease to expire", timeout=20)
        assert request(port, "DELETE", "/api/remove/a")[0] == 500   # gone: refused
        request(port, "PUT", "/api/put", {"key": "b", "value": "x"})
        assert request(port, "DELETE", "/api/remove_all") == \
            (200, b'{"status": "success removed 1 keys"}')
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, proc.stderr.read()
    assert segments(d) == {}                                 # unmounted on SIGTERM


def _up(port):
    try:
        return request(port, "GET", "/api/exist/x")[0] == 200
    except OSError:
        return False
