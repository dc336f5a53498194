"""python -m crescent.store_service --config FILE --port N

A standalone store client over HTTP, for debugging (Mooncake's
mooncake_store_service.py): it sets up a MooncakeDistributedStore from the
reference's config file keys, hosts its global_segment_size of memory in the
pool like any engine, and serves the reference's REST routes:

    PUT    /api/put            {"key": K, "value": "text"}  -> {"status": "success"}
    GET    /api/get/K          the value's bytes (application/octet-stream); 404 missing
    GET    /api/exist/K        {"exists": true|false}
    DELETE /api/remove/K       {"status": "success"}; 500 {"error": ...} when refused
    DELETE /api/remove_all     {"status": "success removed N keys"}

Config file (JSON; the reference's keys): local_hostname, metadata_server
(accepted, unused), global_segment_size, local_buffer_size, protocol,
device_name, master_server_address, tenant_id.  Without --config the
reference's environment is read (MOONCAKE_CONFIG_PATH, or MOONCAKE_MASTER,
MOONCAKE_LOCAL_HOSTNAME, MOONCAKE_GLOBAL_SEGMENT_SIZE, ...).  -D key=value
overrides one key.  It listens on --host (default 127.0.0.1: nothing here is
authenticated; the reference binds 0.0.0.0) and stops on SIGINT/SIGTERM,
unmounting its segment.
"""
import argparse
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

from crescent.mooncake_store import MooncakeDistributedStore, _size

DEFAULTS = {"local_hostname": "localhost", "metadata_server": "P2PHANDSHAKE",
            "global_segment_size": 3355443200, "local_buffer_size": 1073741824,
            "protocol": "tcp", "device_name": "", "master_server_address": None,
            "tenant_id": "default"}
ENV = {"local_hostname": "MOONCAKE_LOCAL_HOSTNAME", "metadata_server": "MOONCAKE_TE_META_DATA_SERVER",
       "global_segment_size": "MOONCAKE_GLOBAL_SEGMENT_SIZE",
       "local_buffer_size": "MOONCAKE_LOCAL_BUFFER_SIZE", "protocol": "MOONCAKE_PROTOCOL",
       "device_name": "MOONCAKE_DEVICE", "master_server_address": "MOONCAKE_MASTER",
       "tenant_id": "MOONCAKE_TENANT_ID"}
MAX_BODY = 100 << 20  # the reference's client_max_size


def load_config(path, overrides):
    """The reference's MooncakeConfig: a file, else the environment."""
    path = path or os.environ.get("MOONCAKE_CONFIG_PATH")
    config = dict(DEFAULTS)
    if path:
        with open(path) as f:
            config.update(json.load(f))
    else:
        config.update({k: os.environ[v] for k, v in ENV.items() if v in os.environ})
    config.update(overrides)
    if not config.get("master_server_address"):
        raise ValueError("master_server_address is not set (config file key, or MOONCAKE_MASTER)")
    for key in ("global_segment_size", "local_buffer_size"):
        config[key] = _size(config[key])
    return config


class Handler(BaseHTTPRequestHandler):
    store = None  # set by serve()

    def _answer(self, status, body, kind="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _key(self, prefix):
        return unquote(self.path[len(prefix):]) if self.path.startswith(prefix) else None

    def do_PUT(self):  # noqa: N802  (http.server's names)
        if self.path != "/api/put":
            return self._answer(404, {"error": "Not found"})
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return self._answer(413, {"error": f"body larger than {MAX_BODY} bytes"})
        try:
            data = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            return self._answer(400, {"error": "body is not JSON"})
        key, value = data.get("key"), data.get("value")
        if not key or value is None:
            return self._answer(400, {"error": "Missing key or value"})
        if self.store.put(key, str(value).encode()) != 0:
            return self._answer(500, {"error": "PUT operation failed"})
        return self._answer(200, {"status": "success"})

    def do_GET(self):  # noqa: N802
        key = self._key("/api/get/")
        if key is not None:
            exists = self.store.is_exist(key)
            if exists < 0:
                return self._answer(500, {"error": "Exist check failed"})
            value = self.store.get(key) if exists else b""
            if not exists or (value == b"" and self.store.is_exist(key) == 0):
                return self._answer(404, {"error": "Key not found"})
            return self._answer(200, value, "application/octet-stream")
        key = self._key("/api/exist/")
        if key is not None:
            exists = self.store.is_exist(key)
            if exists < 0:
                return self._answer(500, {"error": "Exist check failed"})
            return self._answer(200, {"exists": exists > 0})
        return self._answer(404, {"error": "Not found"})

    def do_DELETE(self):  # noqa: N802
        if self.path == "/api/remove_all":
            n = self.store.remove_all()
            if n < 0:
                return self._answer(500, {"error": "RemoveAll operation failed"})
            return self._answer(200, {"status": f"success removed {n} keys"})
        key = self._key("/api/remove/")
        if key is None:
            return self._answer(404, {"error": "Not found"})
        if self.store.remove(key) != 0:
            return self._answer(500, {"error": "Remove operation failed"})
        return self._answer(200, {"status": "success"})

    def log_message(self, fmt, *args):
        sys.stderr.write("store_service: " + fmt % args + "\n")


def serve(config, host, port):
    store = MooncakeDistributedStore()
    rc = store.setup(config["local_hostname"], config["metadata_server"],
                     config["global_segment_size"], config["local_buffer_size"],
                     config["protocol"], config["device_name"], config["master_server_address"],
                     tenant_id=config["tenant_id"])
    if rc != 0:
        print(f"store_service: setup failed with {rc}: "
              f"{getattr(store, 'last_error', '')}", file=sys.stderr)
        return 1
    Handler.store = store
    server = ThreadingHTTPServer((host, port), Handler)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    print(f"store_service: serving on http://{host}:{server.server_address[1]} "
          f"(segment {store.get_hostname()}, master {config['master_server_address']})",
          file=sys.stderr, flush=True)
    stop.wait()
    server.shutdown()
    return store.close()


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m crescent.store_service",
        description="A standalone store client over HTTP (Mooncake's mooncake_store_service): "
                    "hosts a segment and serves /api/put, /api/get/KEY, /api/exist/KEY, "
                    "/api/remove/KEY, /api/remove_all.",
        epilog="example: python -m crescent.store_service --config mooncake.json --port 8080")
    parser.add_argument("--config", help="the reference's JSON config file "
                        "(default: $MOONCAKE_CONFIG_PATH, else MOONCAKE_* variables)")
    parser.add_argument("-D", "--define", action="append", default=[],
                        help="override one config key: -Dlocal_hostname=10.0.0.5")
    parser.add_argument("--port", type=int, default=8080, help="HTTP port (default 8080)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; nothing is authenticated)")
    args = parser.parse_args(argv)
    overrides = dict(item.split("=", 1) for item in args.define if "=" in item)
    try:
        config = load_config(args.config, overrides)
    except (OSError, ValueError) as e:
        print(f"store_service: {e}", file=sys.stderr)
        return 2
    return serve(config, args.host, args.port)


if __name__ == "__main__":
    sys.exit(main())
