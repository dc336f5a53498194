"""crescentctl for scripts and people: --json on every command (one document on
stdout, errors as JSON on stderr, exit codes kept), CMD --help with arguments,
options and an example, and times a person reads (here and in the admin API)."""
import datetime
import json
import re
import subprocess

import pytest

from conftest import binary, free_port, http_get

CLIENT = "6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f"


@pytest.fixture
def store(daemon):
    return daemon()


def ctl(store, *args, check=True):
    rpc = store.args[store.args.index("--rpc-address") + 1]
    r = subprocess.run([binary("crescentctl"), "--http", f"127.0.0.1:{store.port}", "--rpc", rpc,
                        "--timeout-ms", "10000", *args], capture_output=True, text=True,
                       timeout=60, env={"CRESCENT_CLIENT_ID": CLIENT})
    if check:
        assert r.returncode == 0, r.stderr
    return r


def commands():
    out = subprocess.run([binary("crescentctl"), "--help"], capture_output=True, text=True,
                         check=True).stdout
    section = out[out.index("Commands:"):out.index("Options:")]
    return [m.group(1) for m in re.finditer(r"^  ([a-z-]+)", section, re.M)]


def test_every_command_has_its_own_help():
    names = commands()
    assert {"health", "stats", "mount", "get", "events", "ls"} <= set(names)
    for name in names:
        if name == "version":
            continue
        r = subprocess.run([binary("crescentctl"), name, "--help"], capture_output=True,
                           text=True)
        assert r.returncode == 0, (name, r.stderr)
        assert r.stdout.startswith("Usage: crescentctl"), name
        assert f" {name} " in r.stdout.splitlines()[0], name
        assert "Example:" in r.stdout and f"crescentctl {name}" in r.stdout, name
    mount = subprocess.run([binary("crescentctl"), "mount", "--help"], capture_output=True,
                           text=True).stdout
    assert "Arguments:" in mount and "--keepalive" in mount and "SIZE" in mount


def test_json_documents(store):
    docs = {}
    steps = [("mount", "seg0", "64M", "--endpoint", "10.0.0.5:1"), ("put-start", "k1", "4K"),
             ("put-end", "k1"), ("replicas", "k1"), ("exist", "k1"), ("ls",), ("ping",),
             ("store-stats",), ("health",), ("stats",), ("metrics",), ("version",)]
    for step in steps:
        r = ctl(store, *step, "--json")
        lines = r.stdout.splitlines()
        assert len(lines) == 1, (step, r.stdout)
        docs[step[0]] = json.loads(lines[0])
    assert docs["mount"]["mounted"] == "seg0" and docs["mount"]["client_id"] == CLIENT
    assert docs["put-start"]["replicas"][0]["buffers"][0]["segment"] == "seg0"
    assert docs["put-end"] == {"command": "put-end", "key": "k1", "tenant": "default", "ok": True}
    assert docs["replicas"]["replicas"][0]["status"] == "COMPLETE"
    assert docs["exist"]["exists"] is True
    assert docs["ls"]["objects"][0]["key"] == "k1"
    assert docs["ping"]["ready"] is True and docs["ping"]["client_ttl_ms"] == 10000
    _, stats = http_get(store.port, "/api/v1/stats")
    assert docs["store-stats"]["objects"] == json.loads(stats)["objects"] == 1
    assert docs["health"]["status"] == "ok"
    assert docs["stats"]["store"]["objects"] == 1 and "replay" in docs["stats"]["events"]
    assert any(s["name"] == "crescent_segments_objects" and s["value"] == 1
               for s in docs["metrics"]["samples"])
    assert "version" in docs["version"]


@pytest.mark.parametrize("args,code", [(("get", "nokey"), 1), (("get",), 2), (("bogus",), 2)])
def test_json_errors_keep_exit_codes(store, args, code):
    r = ctl(store, "--json", *args, check=False)
    assert r.returncode == code
    assert r.stdout == ""
    err = json.loads(r.stderr)
    assert err["exit_code"] == code and err["error"]


def test_json_unreachable_exits_3():
    r = subprocess.run([binary("crescentctl"), "--rpc", f"tcp://127.0.0.1:{free_port()}",
                        "--timeout-ms", "300", "get", "k", "--json"], capture_output=True,
                       text=True)
    assert r.returncode == 3
    assert json.loads(r.stderr)["command"] == "get"


def test_times_a_person_reads(store):
    ctl(store, "mount", "seg0", "64M", "--endpoint", "10.0.0.5:1")
    ctl(store, "put-start", "k1", "4K")
    ctl(store, "put-end", "k1")
    ctl(store, "replicas", "k1")  # takes a lease (5 s by default)
    refused = ctl(store, "rm", "k1", check=False)
    assert refused.returncode == 1
    assert re.search(r"the lease expires in \d+\.\d s", refused.stderr), refused.stderr
    _, body = http_get(store.port, "/api/v1/objects/k1")
    obj = json.loads(body)
    now = datetime.datetime.now(datetime.timezone.utc)
    for field in ("put_start", "last_access", "lease_expires"):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", obj[field]), obj[field]
        when = datetime.datetime.fromisoformat(obj[field][:-1] + "+00:00")
        assert abs((when - now).total_seconds()) < 120
    assert 0 < obj["lease_expires_in_s"] <= 5.0
    ls = ctl(store, "ls").stdout
    assert re.search(r"leased \(expires in \d+\.\d s\)", ls), ls
    ping = ctl(store, "ping").stdout
    assert "client ttl 10.0 s" in ping
