"""docs/grafana-crescent.json, the Grafana board for crescent's own metrics:
every family its queries name is one crescentd serves on the main front's
/metrics, so the board cannot drift from the metric names."""
import json
import os
import re

from conftest import http_get

BOARD = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "grafana-crescent.json")


def test_every_query_names_served_families(daemon):
    d = daemon()
    _, body = http_get(d.port, "/metrics")
    served = {l.split()[2] for l in body.decode().splitlines() if l.startswith("# TYPE ")}
    board = json.load(open(BOARD))
    assert board["panels"]
    for panel in board["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            regex = re.search(r'__name__=~"([^"]+)"', expr)
            if regex:
                pattern = re.compile(regex.group(1))
                assert any(pattern.fullmatch(n) for n in served), expr
            names = re.findall(r"\bcrescent_[a-z0-9_]+", re.sub(r'"[^"]*"', "", expr))
            for name in names:
                assert name in served, f"{panel['title']}: {name} is not served"
            assert regex or names, expr
