"""Issue 10: requests that must neither crash, stall nor bloat crescentd
(a hostile client's view; each test failed on the code before its fix)."""
import json
import urllib.request

from conftest import http_get

# Every route that parses a request body (docs/http.md).
JSON_ROUTES = ["/query", "/query_by_hash", "/route", "/register", "/unregister", "/load"]


def post(port, path, data, content_type="application/json", timeout=10):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method="POST",
                                 headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_deeply_nested_bodies_are_refused_on_every_json_route(daemon):
    d = daemon()
    # ~950 levels killed a CivetWeb worker (and the process) before the bound;
    # 100,000 would overflow any stack.
    for depth in (950, 2500, 100_000):
        for opener, closer in (("[", "]"), ('{"a":', "}")):
            body = ('{"model":"m","block_size":16,"x":' + opener * depth + "1" + closer * depth
                    + "}").encode()
            for path in JSON_ROUTES:
                status, raw = post(d.port, path, body)
                answer = json.loads(raw)
                assert status == 400, (path, depth, answer)
                assert answer["error"] == "invalid JSON", (path, answer)
                assert "nested deeper than 32 levels" in answer["detail"], (path, answer)
    assert http_get(d.port, "/health")[0] == 200
    assert d.proc.poll() is None
