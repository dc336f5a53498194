"""Issue 10: requests that must neither crash, stall nor bloat crescentd
(a hostile client's view; each test failed on the code before its fix)."""
import json

from conftest import http_get
from test_indexer import post

# Every route that parses a request body (src/http/indexer_routes.c).
JSON_ROUTES = ["/query", "/query_by_hash", "/route", "/register", "/unregister", "/load"]


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
